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

import "testing"

func TestOneSubnet(t *testing.T) {
	tests := []struct {
		name     string
		network  []string
		allowed  []string
		request  string
		want     string
		wantRule string
		wantIn   []string
	}{
		{name: "a network with one subnet needs no subnet named", network: []string{"s1"}, allowed: []string{"s1"}, want: "s1"},
		{name: "one allowed subnet on a network with several is chosen", network: []string{"s1", "s2"}, allowed: []string{"s2"}, want: "s2"},
		{name: "the named subnet is used", network: []string{"s1", "s2"}, allowed: []string{"s1", "s2"}, request: "s2", want: "s2"},
		{name: "unknown network subnets: the single allowed one is chosen", allowed: []string{"s1"}, want: "s1"},
		{name: "allowed subnets gone from the network are not candidates", network: []string{"s1"}, allowed: []string{"s1", "s-gone"}, want: "s1"},
		{name: "several subnets allowed and none named is refused", network: []string{"s1", "s2", "s3"}, allowed: []string{"s1", "s2"},
			wantRule: RuleOneSubnet, wantIn: []string{"has 2 subnets allowed", "set sharedNetwork.subnet to one of s1, s2"}},
		{name: "a subnet not on the network is refused, naming the network", network: []string{"s1", "s2"}, allowed: []string{"s1", "s2"}, request: "s9",
			wantRule: RuleOneSubnet, wantIn: []string{`"s9"`, `"vm-net"`, "s1, s2"}},
		{name: "two subnets separated by a comma are refused", network: []string{"s1", "s2"}, allowed: []string{"s1", "s2"}, request: "s1,s2",
			wantRule: RuleOneSubnet, wantIn: []string{"a nodegroup reaches only one subnet; use one nodegroup per subnet"}},
		{name: "two subnets separated by a space are refused", network: []string{"s1", "s2"}, allowed: []string{"s1", "s2"}, request: "s1 s2",
			wantRule: RuleOneSubnet, wantIn: []string{"a nodegroup reaches only one subnet; use one nodegroup per subnet"}},
		{name: "no allowed subnet is refused", network: []string{"s1"},
			wantRule: RuleOneSubnet, wantIn: []string{"allows no subnet"}},
		{name: "allowed subnets none of which is on the network are refused", network: []string{"s1"}, allowed: []string{"s8"},
			wantRule: RuleOneSubnet, wantIn: []string{"s8", "s1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, v := OneSubnet("vm-net", tt.network, tt.allowed, tt.request)
			expect(t, v, tt.wantRule, tt.wantIn...)
			if got != tt.want {
				t.Errorf("subnet = %q, want %q", got, tt.want)
			}
		})
	}
}
