// SPDX-License-Identifier: Apache-2.0

package config

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/kernel-exporter/kernel_exporter/internal/suggest"
)

// yamlKeys returns the keys of every mapping type of a config, by Go type
// name as yaml.v3 names it in "field x not found in type config.Counter":
// the yaml tags of the struct types Config holds, through pointers,
// slices and maps, inline structs' keys with their parent's. Built once.
var yamlKeys = sync.OnceValue(func() map[string][]string {
	keys := map[string][]string{}
	pkg := reflect.TypeFor[Config]().PkgPath()
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t.PkgPath() != pkg || t.Name() == "" {
			return
		}
		if _, done := keys[t.Name()]; done {
			return
		}
		keys[t.Name()] = nil
		keys[t.Name()] = structKeys(t, walk)
	}
	walk(reflect.TypeFor[Config]())
	return keys
})

// structKeys returns the yaml keys of struct type t (yaml.v3's rules: the
// tag's name, else the field's name in lower case; "-" and unexported
// fields have none; ",inline" adds the inner struct's), calling walk on
// every field's type.
func structKeys(t reflect.Type, walk func(reflect.Type)) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if slices.Contains(strings.Split(opts, ","), "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, structKeys(ft, walk)...)
			}
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out = append(out, name)
		walk(f.Type)
	}
	return out
}

// didYouMean is " (did you mean "labels"?)" for key, unknown in config
// type goType, when it is a near miss of one of the type's keys; else "".
// Only the type's own key names are shown.
func didYouMean(key, goType string) string {
	return suggest.DidYouMean(key, yamlKeys()[goType], strconv.Quote)
}
