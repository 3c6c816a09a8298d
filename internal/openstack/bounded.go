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

package openstack

import (
	"fmt"
	"io"
	"net/http"
)

// boundedTransport fails any answer whose body is longer than limit: the
// reader (gophercloud decodes whole bodies) gets an error at limit+1 bytes
// instead of a body a hostile endpoint streams forever.
type boundedTransport struct {
	next  http.RoundTripper
	limit int64
}

func (t *boundedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > t.limit {
		_ = resp.Body.Close()
		return nil, &tooLargeError{host: req.URL.Host, limit: t.limit}
	}
	resp.Body = &boundedBody{ReadCloser: resp.Body, left: t.limit, host: req.URL.Host, limit: t.limit}
	return resp, nil
}

type boundedBody struct {
	io.ReadCloser
	left  int64
	host  string
	limit int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, &tooLargeError{host: b.host, limit: b.limit}
	}
	// One byte more than allowed tells a body at the limit from a longer one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.ReadCloser.Read(p)
	if b.left -= int64(n); b.left < 0 {
		return n, &tooLargeError{host: b.host, limit: b.limit}
	}
	return n, err
}

type tooLargeError struct {
	host  string
	limit int64
}

func (e *tooLargeError) Error() string {
	return fmt.Sprintf("the answer of %s is longer than %d MiB; refused", e.host, e.limit>>20)
}
