package natsperm

import (
	"fmt"
	"io"
	"strconv"
	"strings"
)

// User is one NATS user of the relay's account: a node of a role (Node ""
// for a user the role's nodes share) that authenticates with an nkey or a
// password.
type User struct {
	Role Role
	Node string
	// NKey is the user's public nkey (U…); else Name and Password, where
	// Password may be a $VARIABLE nats-server takes from its environment.
	NKey           string
	Name, Password string
}

// Account is the nats-server account every relay user belongs to.
const Account = "RELAY"

// Render writes the nats-server configuration of the relay's account with
// users and their permissions under o: an `accounts` block to include
// from the server's configuration. Its output depends only on its input.
func Render(w io.Writer, header string, users []User, o Options) error {
	var b strings.Builder
	for _, line := range strings.Split(strings.TrimRight(header, "\n"), "\n") {
		b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	fmt.Fprintf(&b, "\naccounts {\n  %s {\n    jetstream: enabled\n    users: [\n", Account)
	for _, u := range users {
		fmt.Fprintf(&b, "      # %s\n      {\n", describe(u.Role, u.Node))
		if u.NKey != "" {
			fmt.Fprintf(&b, "        nkey: %s\n", u.NKey)
		} else {
			fmt.Fprintf(&b, "        user: %s\n        password: %s\n", quote(u.Name), u.Password)
		}
		p := For(u.Role, u.Node, o)
		b.WriteString("        permissions: {\n          publish: {\n")
		list(&b, "allow", p.PublishAllow)
		list(&b, "deny", p.PublishDeny)
		b.WriteString("          }\n          subscribe: {\n")
		list(&b, "allow", p.SubscribeAllow)
		b.WriteString("          }\n")
		// Lets a node answer a request it received (an edge another edge's
		// presence request) without any grant on another's inbox.
		b.WriteString("          allow_responses: true\n        }\n      }\n")
	}
	b.WriteString("    ]\n  }\n}\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func list(b *strings.Builder, name string, gs []Group) {
	if len(gs) == 0 {
		return
	}
	fmt.Fprintf(b, "            %s: [\n", name)
	for _, g := range gs {
		for _, line := range wrap(g.Why, 60) {
			fmt.Fprintf(b, "              # %s\n", line)
		}
		for _, s := range g.Subjects {
			fmt.Fprintf(b, "              %s\n", quote(s))
		}
	}
	b.WriteString("            ]\n")
}

func quote(s string) string { return strconv.Quote(s) }

// wrap splits text into lines of at most width characters, at spaces.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// PasswordUsers are one user per role, shared by its nodes, with the
// password nats-server reads from $RELAY_NATS_<ROLE>_PASSWORD: the users
// of configs/nats/accounts.conf.
func PasswordUsers() []User {
	out := make([]User, len(Roles))
	for i, r := range Roles {
		out[i] = User{Role: r, Name: string(r), Password: PasswordVar(r)}
	}
	return out
}

// PasswordVar is the nats-server variable of role's password.
func PasswordVar(r Role) string { return "$RELAY_NATS_" + strings.ToUpper(string(r)) + "_PASSWORD" }

// RenderPasswords writes the account with PasswordUsers: the form of
// configs/nats/accounts.conf.
func RenderPasswords(w io.Writer, o Options) error {
	header := "The relay's NATS users, one per role, written by `relay nats users --passwords`:\n" +
		"nats-server.conf includes it. Regenerate it rather than edit it. Each password\n" +
		"comes from nats-server's environment ($RELAY_NATS_<ROLE>_PASSWORD). For a user\n" +
		"per node, so that no node can write another's keys or read its replies, use\n" +
		"`relay nats users --edges … --workers … --coordinators …` (README.md)."
	return Render(w, header, PasswordUsers(), o)
}
