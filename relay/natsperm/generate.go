package natsperm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nkeys"
)

// Nodes names the nodes of each relay role that get an identity.
type Nodes map[Role][]string

// AccountsFile is the file Generate writes the account into, for the
// server's configuration to include.
const AccountsFile = "accounts.conf"

// SeedFile is the name, in Generate's directory, of the nkey seed of
// role's node (node "" for the setup identity): the file the node's
// nats.nkey_seed_file names.
func SeedFile(role Role, node string) string {
	if node == "" {
		return string(role) + ".nk"
	}
	return string(role) + "." + node + ".nk"
}

// Generate gives every node of nodes, and the setup step, an nkey of its
// own, and writes into dir each seed (mode 0600, readable only by the
// node's user) and AccountsFile, the account with every user's
// permissions. A seed file already in dir is kept, so running it again
// with more nodes changes no existing identity, and the output depends
// only on the seeds. New seeds draw on random (crypto/rand.Reader in
// production). It returns the users it wrote.
func Generate(dir string, nodes Nodes, o Options, random io.Reader) ([]User, error) {
	var users []User
	for _, role := range Roles {
		names := nodes[role]
		if role == Setup {
			names = []string{""}
		}
		seen := map[string]bool{}
		for _, node := range names {
			if role != Setup {
				if err := ValidNode(node); err != nil {
					return nil, fmt.Errorf("%s: %w", role, err)
				}
			}
			if seen[node] {
				return nil, fmt.Errorf("%s: node %q named twice", role, node)
			}
			seen[node] = true
			pub, err := seed(filepath.Join(dir, SeedFile(role, node)), random)
			if err != nil {
				return nil, err
			}
			users = append(users, User{Role: role, Node: node, NKey: pub})
		}
	}
	var b bytes.Buffer
	header := "The relay's NATS users, one nkey per node, written by `relay nats users`:\n" +
		"include it from the server's configuration (configs/nats/README.md).\n" +
		"Regenerate it rather than edit it; each node's seed is <role>.<node>.nk beside it."
	if err := Render(&b, header, users, o); err != nil {
		return nil, err
	}
	return users, os.WriteFile(filepath.Join(dir, AccountsFile), b.Bytes(), 0o644)
}

// seed returns the public key of the seed in path, creating the seed there
// first if the file does not exist.
func seed(path string, random io.Reader) (string, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		kp, err := nkeys.CreatePairWithRand(nkeys.PrefixByteUser, random)
		if err != nil {
			return "", fmt.Errorf("natsperm: new nkey: %w", err)
		}
		if data, err = kp.Seed(); err != nil {
			return "", err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return "", err
		}
		_, err = f.Write(append(data, '\n'))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
	} else if err != nil {
		return "", err
	}
	kp, err := nkeys.FromSeed(bytes.TrimSpace(data))
	if err != nil {
		return "", fmt.Errorf("natsperm: %s: %w", path, err)
	}
	return kp.PublicKey()
}
