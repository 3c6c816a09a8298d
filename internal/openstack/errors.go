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
	"errors"
	"fmt"
	"net/http"

	"github.com/gophercloud/gophercloud/v2"
)

// wrap says which project, what was being done and what OpenStack answered.
func (s *Session) wrap(err error, format string, args ...any) error {
	what := fmt.Sprintf(format, args...)
	if gophercloud.ResponseCodeIs(err, http.StatusNotFound) {
		return fmt.Errorf("project %s: %s: %w", s.projectID, what, &NotFoundError{What: what})
	}
	return fmt.Errorf("project %s: %s: %w", s.projectID, what, answer(err))
}

// answer keeps OpenStack's own words (status code and body) in the error.
func answer(err error) error {
	var unexpected gophercloud.ErrUnexpectedResponseCode
	if errors.As(err, &unexpected) {
		return fmt.Errorf("OpenStack answered %d %s: %w", unexpected.Actual, string(unexpected.Body), err)
	}
	return err
}

// IsNotFound says whether err is a NotFoundError.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}

// notReadable is a *NotReadableError for a wrapped err that says the
// cloud's policy does not let the credential read what (403), or Neutron
// has no such thing (404); err otherwise.
func (s *Session) notReadable(err error, what string) error {
	if gophercloud.ResponseCodeIs(err, http.StatusForbidden) || IsNotFound(err) {
		return &NotReadableError{What: fmt.Sprintf("project %s: %s", s.projectID, what)}
	}
	return err
}
