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

package rules

import (
	"fmt"
	"strings"
	"unicode"
)

// OneSubnet returns the subnet a nodegroup uses on SharedNetwork sharedNetwork:
// a nodegroup reaches only one subnet.
//
// networkSubnets are the subnets the network really has, allowedSubnets those
// the SharedNetwork allows, requested the variable's sharedNetwork.subnet.
//
//   - requested naming more than one subnet (a comma or whitespace in it) fails.
//   - requested set: it must be a subnet of the network; it is returned as is
//     (whether it is allowed is checked by Granted).
//   - requested empty: the allowed subnets that are on the network (all allowed
//     subnets when networkSubnets is unknown/empty) are the candidates; exactly
//     one is returned, none or several fail.
func OneSubnet(sharedNetwork string, networkSubnets []string, allowedSubnets []string, requested string) (string, *Violation) {
	fail := func(format string, a ...any) (string, *Violation) {
		return "", &Violation{Rule: RuleOneSubnet, Field: FieldSubnet, Message: fmt.Sprintf(format, a...)}
	}
	if strings.ContainsFunc(requested, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		return fail("sharedNetwork.subnet %q names more than one subnet; a nodegroup reaches only one subnet; use one nodegroup per subnet", requested)
	}
	if requested != "" {
		if !contains(networkSubnets, requested) {
			return fail("subnet %q is not a subnet of the network of SharedNetwork %q (its subnets: %s); set sharedNetwork.subnet to one of them",
				requested, sharedNetwork, list(networkSubnets))
		}
		return requested, nil
	}

	var candidates []string
	for _, s := range allowedSubnets {
		if (len(networkSubnets) == 0 || contains(networkSubnets, s)) && !contains(candidates, s) {
			candidates = append(candidates, s)
		}
	}
	switch len(candidates) {
	case 1:
		return candidates[0], nil
	case 0:
		if len(allowedSubnets) == 0 {
			return fail("SharedNetwork %q allows no subnet; an administrator must add a subnet to the SharedNetwork", sharedNetwork)
		}
		return fail("none of the subnets allowed on SharedNetwork %q (%s) is on its network (its subnets: %s); an administrator must fix the SharedNetwork's allowed subnets",
			sharedNetwork, list(allowedSubnets), list(networkSubnets))
	default:
		return fail("network of SharedNetwork %q has %d subnets allowed (%s); set sharedNetwork.subnet to one of %s",
			sharedNetwork, len(candidates), list(candidates), list(candidates))
	}
}
