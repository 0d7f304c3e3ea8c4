package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/relaydev/relay/relay/relaytest"
)

// nginxConfig is the shipped server configuration the tests run with.
var nginxConfig = filepath.Join("..", "configs", "nginx", "relay.conf")

// The two lines of nginxConfig a test replaces: the upstream's server and
// the listen address. Everything else runs exactly as shipped.
var (
	nginxUpstreamLine = regexp.MustCompile(`(?m)^([ \t]*)server 127\.0\.0\.1:8080;[ \t]*$`)
	nginxListenLine   = regexp.MustCompile(`(?m)^([ \t]*)listen 80;[ \t]*$`)
)

// nginxBinary finds Debian's nginx, which e2e/setup.sh installs (make test
// runs it first). A missing nginx fails the test: it is never skipped.
func nginxBinary(t *testing.T) string {
	t.Helper()
	if path, err := exec.LookPath("nginx"); err == nil {
		return path
	}
	// /usr/sbin is not on every user's PATH.
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	t.Fatal("nginx is not installed: run e2e/setup.sh (make test runs it) to install Debian's nginx package")
	return ""
}

// nginxServerConfig returns nginxConfig with its upstream pointed at edges
// (host:port) and listening on addr.
func nginxServerConfig(t *testing.T, edges []string, addr string) string {
	t.Helper()
	b, err := os.ReadFile(nginxConfig)
	if err != nil {
		t.Fatal(err)
	}
	conf := string(b)
	for _, re := range []*regexp.Regexp{nginxUpstreamLine, nginxListenLine} {
		if n := len(re.FindAllString(conf, -1)); n != 1 {
			t.Fatalf("%s: %d lines match %q, want exactly 1: keep the test's substitutions in step with the file", nginxConfig, n, re)
		}
	}
	conf = nginxUpstreamLine.ReplaceAllStringFunc(conf, func(line string) string {
		indent := nginxUpstreamLine.FindStringSubmatch(line)[1]
		var out []string
		for _, e := range edges {
			out = append(out, indent+"server "+e+";")
		}
		return strings.Join(out, "\n")
	})
	return nginxListenLine.ReplaceAllString(conf, "${1}listen "+addr+";")
}

// startNginx runs nginx in the foreground in front of edges (base URLs)
// and returns its base URL. Its files live in t.TempDir(); it is stopped
// when the test ends, and its error log is shown if the test failed.
func startNginx(t *testing.T, edges []string) string {
	t.Helper()
	bin := nginxBinary(t)
	var hostPorts []string
	for _, e := range edges {
		hostPorts = append(hostPorts, strings.TrimPrefix(e, "http://"))
	}
	dir := t.TempDir()
	errorLog := filepath.Join(dir, "error.log")
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(errorLog)
			t.Logf("nginx error log:\n%s", b)
		}
	})
	// The free port is found by listening and closing, so another process
	// may take it before nginx binds it: try a few.
	var lastErr error
	for range 3 {
		addr := freeLoopbackAddr(t)
		main := fmt.Sprintf(`daemon off;
master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 1024; }
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;

%[2]s
}
`, dir, nginxServerConfig(t, hostPorts, addr))
		confPath := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(confPath, []byte(main), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", errorLog)
		out := &strings.Builder{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start nginx: %v", err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		if lastErr = waitListening(t, addr, exited); lastErr == nil {
			t.Cleanup(func() { stopNginx(t, cmd, exited) })
			return "http://" + addr
		}
		b, _ := os.ReadFile(errorLog)
		lastErr = fmt.Errorf("%w\n%s%s", lastErr, out.String(), b)
		if !strings.Contains(string(b), "Address already in use") {
			break
		}
	}
	t.Fatalf("nginx did not start: %v", lastErr)
	return ""
}

func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// waitListening waits until addr accepts connections; it returns an error
// if nginx exited first.
func waitListening(t *testing.T, addr string, exited <-chan error) error {
	t.Helper()
	var exit error
	relaytest.Eventually(t, 10*time.Second, 20*time.Millisecond, func() bool {
		select {
		case err := <-exited:
			exit = fmt.Errorf("nginx exited: %v", err)
			return true
		default:
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return exit
}

// stopNginx ends nginx at once (SIGTERM: a graceful SIGQUIT would wait for
// open streams), and kills it if it does not go.
func stopNginx(t *testing.T, cmd *exec.Cmd, exited <-chan error) {
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		t.Errorf("nginx did not stop on SIGTERM within 5s; killing it")
		cmd.Process.Kill()
		<-exited
	}
}
