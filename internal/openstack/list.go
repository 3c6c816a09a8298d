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
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
	"github.com/gophercloud/gophercloud/v2/pagination"
)

// maxListPages bounds the pages one list follows. Neutron and Octavia page
// only when asked to (the extension never does) or configured to
// (pagination_max_limit): the largest list listAnswer admits, about 3,000
// ports, fits in 64 pages of 50. A list that goes on is a server whose next
// links never end.
const maxListPages = 64

// listAll reads every item of a Neutron or Octavia collection as T: url is
// the collection's, its query included, key names its items (and, with
// "_links", its links). Each page is decoded once, straight into T: a
// gophercloud pager decodes a page into generic values, then again for
// every question it asks of them, each time costing many times the page.
// The pages together are held to listAnswer, and at most maxListPages of
// them are followed.
func listAll[T any](ctx context.Context, c *gophercloud.ServiceClient, url, key string) ([]T, error) {
	ctx = withListAccount(ctx)
	var all []T
	for pages := 0; url != ""; pages++ {
		if pages == maxListPages {
			return nil, &tooManyPagesError{key: key, host: c.Endpoint}
		}
		var err error
		if all, url, err = readPage(ctx, c, url, key, all); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// readPage appends the items of the page at url to all, and says where the
// next page is ("" after the last, or an empty one). It decodes the page as
// it streams by, one item at a time: what it holds is the items, not the
// page.
func readPage[T any](ctx context.Context, c *gophercloud.ServiceClient, url, key string, all []T) ([]T, string, error) {
	resp, err := pagination.Request(ctx, c, nil, url)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode == http.StatusNoContent {
		return all, "", nil
	}
	dec := json.NewDecoder(resp.Body)
	var links []gophercloud.Link
	read := len(all)
	err = members(dec, func(name string) error {
		switch name {
		case key:
			return elements(dec, func() error {
				var item T
				if err := dec.Decode(&item); err != nil {
					return err
				}
				all = append(all, item)
				return nil
			})
		case key + "_links":
			return dec.Decode(&links)
		}
		return dec.Decode(&ignored{})
	})
	if err == nil {
		_, err = io.Copy(io.Discard, resp.Body) // to its end: the connection is reused
	}
	if err != nil {
		return nil, "", fmt.Errorf("reading a page of %s: %w", key, err)
	}
	if len(all) == read { // the end, as for gophercloud's pagers
		return all, "", nil
	}
	next, err := gophercloud.ExtractNextURL(links)
	return all, next, err
}

// members calls member with the name of each member of the object dec
// reads, which member decodes.
func members(dec *json.Decoder, member func(name string) error) error {
	return container(dec, '{', func() error {
		t, err := dec.Token()
		if err != nil {
			return err
		}
		name, _ := t.(string)
		return member(name)
	})
}

// elements calls element for each element of the array dec reads, which
// element decodes.
func elements(dec *json.Decoder, element func() error) error {
	return container(dec, '[', element)
}

func container(dec *json.Decoder, open json.Delim, each func() error) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if t != open {
		return fmt.Errorf("expected %s, found %v", open, t)
	}
	for dec.More() {
		if err := each(); err != nil {
			return err
		}
	}
	_, err = dec.Token() // its end
	return err
}

// ignored takes any JSON value and keeps nothing of it.
type ignored struct{}

func (ignored) UnmarshalJSON([]byte) error { return nil }

// tooManyPagesError stops a list whose next links go on.
type tooManyPagesError struct{ key, host string }

func (e *tooManyPagesError) Error() string {
	return fmt.Sprintf("the list of %s at %s goes on for more than %d pages (its next links do not end); refused", e.key, e.host, maxListPages)
}
