/*
Copyright The capo-sharednet Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package dataplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Namespace is a named network namespace (`ip netns`) of this machine that
// the harness made: a server, or a pod behind one.
type Namespace string

// Exec runs a command in the namespace, bounded by ctx and one minute.
func (n Namespace) Exec(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", string(n)}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("in namespace %s: %s: %w: %s", n, strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Sh runs a shell script in the namespace.
func (n Namespace) Sh(ctx context.Context, script string) ([]byte, error) {
	return n.Exec(ctx, "sh", "-ec", script)
}

// Do runs fn on an OS thread that has entered the namespace: the sockets fn
// opens (a listener, a dialled connection) belong to the namespace for
// their whole life, whichever thread uses them later. The thread goes back
// to this process's namespace and to the Go runtime afterwards: a thread
// that ended would send its children's parent-death signal (the plane
// starts its processes with one), so it is ended only when it cannot go
// back.
func (n Namespace) Do(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		home, err := os.Open(fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid()))
		if err != nil {
			runtime.UnlockOSThread()
			done <- err
			return
		}
		defer func() { _ = home.Close() }()
		target, err := os.Open("/run/netns/" + string(n))
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("namespace %s: %w", n, err)
			return
		}
		defer func() { _ = target.Close() }()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("entering namespace %s: %w", n, err)
			return
		}
		err = fn()
		if back := unix.Setns(int(home.Fd()), unix.CLONE_NEWNET); back != nil {
			done <- errors.Join(err, fmt.Errorf("leaving namespace %s: %w", n, back)) // the thread stays locked and ends
			return
		}
		runtime.UnlockOSThread()
		done <- err
	}()
	return <-done
}

// Route is one route of `ip -j route`.
type Route struct {
	Dst, Gateway, Dev, Protocol string
}

// Routes are the namespace's IPv4 routes of the main table.
func (n Namespace) Routes(ctx context.Context) ([]Route, error) {
	out, err := n.Exec(ctx, "ip", "-j", "-4", "route", "show")
	if err != nil {
		return nil, err
	}
	var routes []Route
	if err := json.Unmarshal(out, &routes); err != nil {
		return nil, fmt.Errorf("ip -j route in %s: %w: %s", n, err, out)
	}
	return routes, nil
}

// RouteTo is how the namespace sends a packet for dst (`ip route get`):
// the interface, the gateway ("" when dst is on link) and the source.
func (n Namespace) RouteTo(ctx context.Context, dst string) (dev, gateway, src string, err error) {
	out, err := n.Exec(ctx, "ip", "-j", "route", "get", dst)
	if err != nil {
		return "", "", "", err
	}
	var r []struct{ Dev, Gateway, Prefsrc string }
	if err := json.Unmarshal(out, &r); err != nil || len(r) == 0 {
		return "", "", "", fmt.Errorf("ip route get %s in %s: %v: %s", dst, n, err, out)
	}
	return r[0].Dev, r[0].Gateway, r[0].Prefsrc, nil
}

// Ping sends one ICMP echo of size bytes of payload with the don't-fragment
// bit set and waits a second for the answer: true when it came back, false
// when none did; an error when ping could not send (no route, a packet
// larger than the MTU, ping missing).
func (n Namespace) Ping(ctx context.Context, dst string, size int) (bool, error) {
	_, err := n.Exec(ctx, "ping", "-n", "-q", "-c", "1", "-W", "1", "-M", "do", "-s", fmt.Sprint(size), dst)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &exit) && exit.ExitCode() == 1: // sent, no answer
		return false, nil
	default:
		return false, err
	}
}

// SentVia runs send and counts, per interface of ifaces, the packets the
// namespace sent to dst meanwhile (iptables counters on OUTPUT, matched on
// the outgoing interface the routing chose).
func (n Namespace) SentVia(ctx context.Context, dst netip.Addr, ifaces []string, send func() error) (map[string]int, error) {
	rule := func(op, iface string) []string {
		return []string{"iptables", "-w", "5", op, "OUTPUT", "-d", dst.String(), "-o", iface, "-m", "comment", "--comment", "capo-sentvia-" + iface}
	}
	var added []string
	defer func() {
		for _, i := range added {
			_, _ = n.Exec(context.WithoutCancel(ctx), rule("-D", i)...)
		}
	}()
	for _, i := range ifaces {
		if _, err := n.Exec(ctx, rule("-A", i)...); err != nil {
			return nil, err
		}
		added = append(added, i)
	}
	if err := send(); err != nil {
		return nil, err
	}
	out, err := n.Exec(ctx, "iptables", "-w", "5", "-L", "OUTPUT", "-v", "-x", "-n")
	if err != nil {
		return nil, err
	}
	counts := map[string]int{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		for _, i := range ifaces {
			if len(f) > 0 && strings.Contains(line, "/* capo-sentvia-"+i+" */") {
				var pkts int
				if _, err := fmt.Sscan(f[0], &pkts); err != nil {
					return nil, fmt.Errorf("iptables counter of %s: %q", i, line)
				}
				counts[i] = pkts
			}
		}
	}
	return counts, nil
}

func deleteNamespace(ctx context.Context, n Namespace) error {
	if _, err := os.Stat("/run/netns/" + string(n)); os.IsNotExist(err) {
		return nil
	}
	return run(ctx, "ip", "netns", "delete", string(n))
}

// run runs a command on the machine (the root namespace), bounded.
func run(ctx context.Context, name string, args ...string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
