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

package plane

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// process is one manager of the plane running as its own OS process, with
// its output in a log file.
type process struct {
	name    string
	path    string
	args    []string
	env     []string
	log     string // log file
	readyz  string // URL answering 200 once the manager serves its webhooks
	cmd     *exec.Cmd
	exited  chan struct{}
	exitErr error
}

// start runs the process in its own process group. It is sent SIGTERM when
// the process that started it dies, so an aborted test run leaves no manager
// behind.
func (p *process) start() error {
	logFile, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.cmd = exec.Command(p.path, p.args...)
	p.cmd.Env = append(os.Environ(), p.env...)
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := p.cmd.Start(); err != nil {
		_ = logFile.Close()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	p.exited = make(chan struct{})
	go func() {
		p.exitErr = p.cmd.Wait()
		_ = logFile.Close()
		close(p.exited)
	}()
	return nil
}

// waitReady polls the manager's readyz endpoint.
func (p *process) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Kubernetes components serve their health on HTTPS with a self-signed
	// certificate; only 127.0.0.1 is asked, and only for a status code.
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
	}}
	for {
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited (%v); see %s", p.name, p.exitErr, p.log)
		default:
		}
		if resp, err := client.Get(p.readyz); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after %s; see %s", p.name, timeout, p.log)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop ends the process group: SIGTERM, then SIGKILL after a grace period.
func (p *process) stop() error {
	if p.cmd == nil || p.cmd.Process == nil {
		return nil
	}
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(15 * time.Second):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
	return fmt.Errorf("%s did not stop within 15s and was killed", p.name)
}

// kill ends the process group with SIGKILL at once and waits for it.
func (p *process) kill() error {
	if p.cmd == nil || p.cmd.Process == nil {
		return fmt.Errorf("%s is not running", p.name)
	}
	select {
	case <-p.exited:
		return fmt.Errorf("%s had already exited (%v)", p.name, p.exitErr)
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
		return nil
	case <-time.After(15 * time.Second):
		return fmt.Errorf("%s did not exit within 15s of SIGKILL", p.name)
	}
}

func (p *process) pid() int {
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

func addr(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// wrapAssets makes a folder whose kube-apiserver and etcd run the real
// binaries of dir under `setpriv --pdeathsig KILL`: envtest starts them
// without a parent-death signal, and a test binary killed by its timeout
// would otherwise leave them running. KILL, not TERM: on a first SIGTERM
// kube-apiserver starts a graceful shutdown that waits for its clients
// (webhooks of managers that died with the test binary) and was seen still
// running half a minute later; a normal Stop still terminates them
// gracefully. Without setpriv, dir is used as it is.
func wrapAssets(dir, into string) (string, error) {
	setpriv, err := exec.LookPath("setpriv")
	if err != nil {
		return dir, nil //nolint:nilerr // no setpriv: run the binaries directly
	}
	if err := os.MkdirAll(into, 0o755); err != nil {
		return "", err
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		built := filepath.Join(dir, bin)
		if _, err := os.Stat(built); err != nil {
			return "", fmt.Errorf("%s not found in %s (run hack/ensure-envtest-assets.sh): %w", bin, dir, err)
		}
		script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, built)
		if err := os.WriteFile(filepath.Join(into, bin), []byte(script), 0o755); err != nil {
			return "", err
		}
	}
	return into, nil
}
