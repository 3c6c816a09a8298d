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
	"bufio"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/netip"
	"strings"
	"sync"
	"syscall"
	"time"
)

// AddPod puts a pod behind the host as Calico puts a workload endpoint: a
// namespace with addr/32 on eth0, a default route through 169.254.1.1 that
// the host's side of the veth answers by proxy ARP, and a /32 route to the
// pod on the host. It returns the pod's namespace, name + "-pod".
func (h *Host) AddPod(ctx context.Context, addr netip.Addr) (Namespace, error) {
	pod := Namespace(string(h.Namespace) + "-pod")
	hash := fnv.New32a()
	_, _ = hash.Write([]byte(pod))
	cali := fmt.Sprintf("cali%08x", hash.Sum32())
	if err := run(ctx, "ip", "netns", "add", string(pod)); err != nil {
		return "", err
	}
	h.pods = append(h.pods, pod)
	if out, err := h.Sh(ctx, fmt.Sprintf(`ip link add %[1]s type veth peer name eth0 netns %[2]s
ip link set %[1]s up
sysctl -qw net.ipv4.conf.%[1]s.proxy_arp=1 net.ipv4.ip_forward=1
ip route add %[3]s/32 dev %[1]s`, cali, pod, addr)); err != nil {
		return "", fmt.Errorf("the pod's side on the host: %w: %s", err, out)
	}
	if out, err := pod.Sh(ctx, fmt.Sprintf(`ip link set lo up
ip link set eth0 up
ip addr add %s/32 dev eth0
ip route add 169.254.1.1 dev eth0 scope link
ip route add default via 169.254.1.1 dev eth0`, addr)); err != nil {
		return "", fmt.Errorf("the pod's namespace: %w: %s", err, out)
	}
	return pod, nil
}

// Masquerade makes the host masquerade what leaves podCIDR for anywhere
// outside it, as Calico does for an IP pool with natOutgoing (its default),
// or stops it.
func (h *Host) Masquerade(ctx context.Context, podCIDR netip.Prefix, on bool) error {
	op := "-A"
	if !on {
		op = "-D"
	}
	_, err := h.Exec(ctx, "iptables", "-w", "5", "-t", "nat", op, "POSTROUTING", "-s", podCIDR.String(), "!", "-d", podCIDR.String(), "-j", "MASQUERADE")
	return err
}

// Responder is a TCP and UDP server in a namespace (a VM) that answers each
// connection and datagram with the source address it saw, and remembers it.
type Responder struct {
	Addr netip.AddrPort
	tcp  net.Listener
	udp  net.PacketConn
	mu   sync.Mutex
	seen []netip.Addr
	wg   sync.WaitGroup
}

// Serve starts a Responder on addr:port in the namespace.
func Serve(ns Namespace, addr netip.AddrPort) (*Responder, error) {
	r := &Responder{Addr: addr}
	err := ns.Do(func() error {
		var err error
		if r.tcp, err = net.Listen("tcp", addr.String()); err != nil {
			return err
		}
		if r.udp, err = net.ListenPacket("udp", addr.String()); err != nil {
			_ = r.tcp.Close()
			return err
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listening on %s in %s: %w", addr, ns, err)
	}
	r.wg.Add(2)
	go func() {
		defer r.wg.Done()
		for {
			c, err := r.tcp.Accept()
			if err != nil {
				return
			}
			from := r.record(c.RemoteAddr())
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = fmt.Fprintf(c, "seen %s\n", from)
			_ = c.Close()
		}
	}()
	go func() {
		defer r.wg.Done()
		buf := make([]byte, 2048)
		for {
			_, peer, err := r.udp.ReadFrom(buf)
			if err != nil {
				return
			}
			from := r.record(peer)
			_, _ = r.udp.WriteTo([]byte("seen "+from.String()+"\n"), peer)
		}
	}()
	return r, nil
}

func (r *Responder) record(a net.Addr) netip.Addr {
	ap, err := netip.ParseAddrPort(a.String())
	if err != nil {
		return netip.Addr{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seen = append(r.seen, ap.Addr().Unmap())
	return ap.Addr().Unmap()
}

// Seen is the source address of every connection and datagram that
// reached the responder, in order.
func (r *Responder) Seen() []netip.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]netip.Addr(nil), r.seen...)
}

// Close stops the responder.
func (r *Responder) Close() {
	_ = r.tcp.Close()
	_ = r.udp.Close()
	r.wg.Wait()
}

// Ask connects over TCP from the namespace to a Responder and returns the
// source address it says it saw.
func Ask(ns Namespace, dst netip.AddrPort, timeout time.Duration) (netip.Addr, error) {
	var seen netip.Addr
	err := ns.Do(func() error {
		c, err := net.DialTimeout("tcp", dst.String(), timeout)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(timeout))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		seen, err = parseSeen(line)
		return err
	})
	return seen, err
}

// AskUDP sends one datagram from the namespace to a Responder and returns
// the source address its answer says it saw.
func AskUDP(ns Namespace, dst netip.AddrPort, timeout time.Duration) (netip.Addr, error) {
	var seen netip.Addr
	err := ns.Do(func() error {
		c, err := net.DialTimeout("udp", dst.String(), timeout)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(timeout))
		if _, err := c.Write([]byte("who am I\n")); err != nil {
			return err
		}
		buf := make([]byte, 128)
		n, err := c.Read(buf)
		if err != nil {
			return err
		}
		seen, err = parseSeen(string(buf[:n]))
		return err
	})
	return seen, err
}

func parseSeen(line string) (netip.Addr, error) {
	a, ok := strings.CutPrefix(strings.TrimSpace(line), "seen ")
	if !ok {
		return netip.Addr{}, fmt.Errorf("not a responder's answer: %q", line)
	}
	return netip.ParseAddr(a)
}

// IsTimeout says whether err is a dial or read that got no answer in time
// (what a packet dropped by a firewall looks like), as opposed to a
// refusal or an error of the harness.
func IsTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// IsDropped says whether err is a request that went out and got no answer:
// a timeout, or a host unreachable because nothing answered ARP for the
// next hop.
func IsDropped(err error) bool {
	return IsTimeout(err) || errors.Is(err, syscall.EHOSTUNREACH)
}
