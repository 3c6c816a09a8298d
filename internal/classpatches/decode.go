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

package classpatches

import (
	"encoding/json"
	"reflect"
	"strings"

	"sigs.k8s.io/yaml"
)

// decodeJSON decodes a variable or a literal value: at most
// MaxDecodedNodes values, charged to the evaluation.
func (e *evaluation) decodeJSON(raw []byte) (any, error) {
	if n := nodes(raw); n > MaxDecodedNodes {
		return nil, e.trip(bounded("the value may decode to %d values, more than %d", n, MaxDecodedNodes))
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return v, e.charge(measured(v))
}

// decodeYAML decodes what a template rendered, as CAPI does: at most
// MaxDecodedNodes values, and no alias, charged to the evaluation.
func (e *evaluation) decodeYAML(text string) (any, error) {
	if alias(text) {
		return nil, e.trip(bounded("the template's YAML has an alias (*name): aliases are not expanded here, write the value out"))
	}
	if n := nodes(text); n > MaxDecodedNodes {
		return nil, e.trip(bounded("the template's YAML may decode to %d values, more than %d", n, MaxDecodedNodes))
	}
	var v any
	if err := yaml.Unmarshal([]byte(text), &v); err != nil {
		return nil, err
	}
	return v, e.charge(measured(v))
}

// nodes bounds how many values a YAML text, so a JSON one, decodes to, but
// for aliases: each value but the first follows one of , - : [ { ? or a
// line break, and a mapping's entry is two values.
func nodes[T ~string | ~[]byte](text T) int {
	n := 0
	for i := range len(text) {
		switch text[i] {
		case ',', '-', ':', '[', '{', '?', '\n':
			n++
		}
	}
	return 2*n + 1
}

// alias says whether text may have a YAML alias: a `*` where a value starts
// (a plain scalar cannot start with one). An alias repeats what its anchor
// holds, which can hold aliases again, so a short text decodes to millions
// of values: yaml.v2 stops only at 99% of them aliased.
func alias(text string) bool {
	for i := 0; i < len(text); i++ {
		j := strings.IndexByte(text[i:], '*')
		if j < 0 {
			return false
		}
		i += j
		starts := i == 0 || strings.IndexByte(" \t\r\n[{,:", text[i-1]) >= 0
		named := i+1 < len(text) && strings.IndexByte(" \t\r\n,[]{}", text[i+1]) < 0
		if starts && named {
			return true
		}
	}
	return false
}

func measured(v any) int {
	size, _ := measure(MaxAllocatedBytes, reflect.ValueOf(v))
	return size
}

// opBytes covers an operation's JSON but its path and value.
const opBytes = len(`{"op":"replace","path":"","value":},`)

// jsonBound is the most JSON v encodes to: a byte of a string can take 6
// ("\u0000"), and the nodeBytes of an element cover its punctuation and
// any number.
func jsonBound(v any) int {
	size, _ := measure(MaxDocumentBytes, reflect.ValueOf(v))
	return 6 * size
}
