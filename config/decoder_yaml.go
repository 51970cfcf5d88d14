// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"

	"gopkg.in/yaml.v3"
)

// decoderFields is Decoder without its UnmarshalYAML method.
type decoderFields Decoder

// decoderKeys are the keys a decoder mapping may have.
var decoderKeys = map[string]bool{"name": true, "static_map": true, "allow_unknown": true, "regexps": true, "stack_map": true}

// UnmarshalYAML decodes a decoder in time linear in its size.
//
// yaml.v3 checks a mapping for duplicate keys by comparing every key with
// every other one before decoding it: a static_map of n entries cost n²/2
// string comparisons (a 1 MiB config with a static_map of 130k entries took
// minutes). Here the decoder's keys and the static_map's entries are checked
// for duplicates with a hash set, unknown keys are refused before yaml.v3
// sees the mapping (as Parse's KnownFields does), and the static_map is
// built entry by entry. Errors are yaml.v3's, in its words, so that Parse
// reports them the same way ("mapping key ... already defined", "field ...
// not found"). Map keys and values are scalars; aliases to scalars are
// followed, and merge keys (<<) are refused in a static_map.
func (d *Decoder) UnmarshalYAML(n *yaml.Node) error {
	type Decoder decoderFields // prints as config.Decoder in yaml.v3's errors
	if n.Kind != yaml.MappingNode {
		return n.Decode((*Decoder)(d))
	}
	if err := uniqueKeys(n); err != nil {
		return err
	}
	rest := *n
	rest.Content = make([]*yaml.Node, 0, len(n.Content))
	var staticMap *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode && !decoderKeys[k.Value] {
			return typeError(k, "field %s not found in type config.Decoder", k.Value)
		}
		if k.Kind == yaml.ScalarNode && k.Value == "static_map" {
			staticMap = v
			continue
		}
		if m := findMapping(v, 0); m != nil {
			// No decoder setting but static_map is a mapping: refuse it
			// before yaml.v3 checks its keys.
			return typeError(m, "cannot unmarshal !!map into %s", decoderKeyType[k.Value])
		}
		rest.Content = append(rest.Content, k, v)
	}
	if err := rest.Decode((*Decoder)(d)); err != nil {
		return err
	}
	if staticMap == nil {
		return nil
	}
	m, err := decodeStaticMap(staticMap)
	if err != nil {
		return err
	}
	d.StaticMap = m
	return nil
}

// decoderKeyType is the Go type of each setting, for errors.
var decoderKeyType = map[string]string{"name": "string", "allow_unknown": "bool", "regexps": "string", "stack_map": "string"}

// findMapping returns the first mapping in n (n itself, or an element of a
// sequence), following aliases, or nil.
func findMapping(n *yaml.Node, depth int) *yaml.Node {
	n = resolve(n)
	switch {
	case n.Kind == yaml.MappingNode:
		return n
	case n.Kind == yaml.SequenceNode && depth < maxAliasDepth:
		for _, c := range n.Content {
			if m := findMapping(c, depth+1); m != nil {
				return m
			}
		}
	}
	return nil
}

// maxAliasDepth bounds how many aliases in a row are followed.
const maxAliasDepth = 16

// resolve follows aliases.
func resolve(n *yaml.Node) *yaml.Node {
	for i := 0; i < maxAliasDepth && n.Kind == yaml.AliasNode && n.Alias != nil; i++ {
		n = n.Alias
	}
	return n
}

// decodeStaticMap decodes a static_map mapping of scalars into a map, in
// time linear in its entries. A null value is an empty map; anything but a
// mapping gets yaml.v3's error.
func decodeStaticMap(n *yaml.Node) (map[string]string, error) {
	n = resolve(n)
	if n.Kind != yaml.MappingNode {
		var m map[string]string
		err := n.Decode(&m)
		return m, err
	}
	if err := uniqueKeys(n); err != nil {
		return nil, err
	}
	m := make(map[string]string, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, err := scalarString(n.Content[i])
		if err != nil {
			return nil, err
		}
		v, err := scalarString(n.Content[i+1])
		if err != nil {
			return nil, err
		}
		m[k] = v
	}
	return m, nil
}

// scalarString decodes a scalar (or an alias to one) as yaml.v3 decodes it
// into a string field.
func scalarString(n *yaml.Node) (string, error) {
	n = resolve(n)
	if n.Kind != yaml.ScalarNode {
		var s string
		if n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode {
			// Do not let yaml.v3 check a large mapping's keys: the
			// error is the same for any collection.
			return "", typeError(n, "cannot unmarshal %s into string", kindTag(n))
		}
		err := n.Decode(&s)
		return s, err
	}
	switch n.ShortTag() {
	case "!!merge":
		return "", typeError(n, "merge keys (<<) are not supported in static_map")
	case "!!str", "!!int", "!!float", "!!bool", "!!timestamp":
		return n.Value, nil
	}
	var s string
	err := n.Decode(&s)
	return s, err
}

func kindTag(n *yaml.Node) string {
	if n.Kind == yaml.MappingNode {
		return "!!map"
	}
	return "!!seq"
}

// uniqueKeys is yaml.v3's duplicate key check with a hash set.
func uniqueKeys(n *yaml.Node) error {
	type key struct {
		kind  yaml.Kind
		value string
	}
	seen := make(map[key]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		kk := key{k.Kind, k.Value}
		if line, ok := seen[kk]; ok {
			return typeError(k, "mapping key %#v already defined at line %d", k.Value, line)
		}
		seen[kk] = k.Line
	}
	return nil
}

// typeError is a yaml.v3 type error at n's line.
func typeError(n *yaml.Node, format string, args ...any) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: ", n.Line) + fmt.Sprintf(format, args...)}}
}
