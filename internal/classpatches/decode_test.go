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
	"testing"

	"sigs.k8s.io/yaml"
)

// values counts what a decoded value holds, itself included, as the
// decoder built it.
func values(v any) int {
	n := 1
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			n += 1 + values(e) // the key too
		}
	case []any:
		for _, e := range v {
			n += values(e)
		}
	}
	return n
}

// nodes never counts fewer values than a YAML or JSON text decodes to.
func TestNodesBoundWhatATextDecodesTo(t *testing.T) {
	for _, text := range []string{
		`x`, `""`, `[]`, `{}`, `[0,0,0]`, `[[],[],{}]`, `{"a":1,"b":[1,2],"c":{"d":null}}`, `{a, b, c}`, `[a, b, {c}]`,
		"- \n- \n- \n", "a:\nb:\nc:\n", "? a\n? b\n", "- a: 1\n  b: 2\n- [x, y]\n", "a: [1,\n  2]\nb: {c: d}\n",
		"- - - - x\n", "[[[[[]]]]]", "{a: {b: {c: {}}}}", "!!map {a: !!seq [x]}", "a: |\n  text\n  more\n",
		"- ~\n- null\n-\n", "{? a : b, ? c}", "[? a : b, c]",
	} {
		var v any
		if err := yaml.Unmarshal([]byte(text), &v); err != nil {
			t.Fatalf("%q: %v", text, err)
		}
		if got, n := values(v), nodes(text); n < got {
			t.Errorf("nodes(%q) = %d, it decodes to %d values", text, n, got)
		}
	}
}

func TestAliasFindsEveryAlias(t *testing.T) {
	for text, want := range map[string]bool{
		"a: &x 1\nb: *x": true, "[*x]": true, "[1,*x]": true, "{a: *x}": true, "- *x": true, "*x": true, "a:\t*x": true, "? *x\n": true,
		`"*.example.com"`: false, "a*b": false, "x: 2 * 3": false, "'*x'": false, "a: b*": false, "[*]": false,
	} {
		if got := alias(text); got != want {
			t.Errorf("alias(%q) = %t, want %t", text, got, want)
		}
	}
}
