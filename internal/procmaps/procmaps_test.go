// SPDX-License-Identifier: Apache-2.0

package procmaps

import (
	"reflect"
	"testing"
)

const sample = `00400000-00d94000 r-xp 00000000 fe:00 10330373                           /usr/bin/kernel exporter
00d94000-0192e000 r--p 00994000 fe:00 10330373                           /usr/bin/kernel exporter
0192e000-019c8000 rw-p 0152e000 fe:00 10330373                           /usr/bin/kernel exporter
019c8000-03a17000 rw-p 00000000 00:00 0
7ffe2b76f000-7ffe2b790000 rw-p 00000000 00:00 0                          [stack]
bad line
10-5 r--p 00000000 00:00 0
`

func TestParse(t *testing.T) {
	got := Parse([]byte(sample))
	want := []Mapping{
		{Start: 0x400000, End: 0xd94000, Perms: "r-xp", Path: "/usr/bin/kernel exporter"},
		{Start: 0xd94000, End: 0x192e000, Offset: 0x994000, Perms: "r--p", Path: "/usr/bin/kernel exporter"},
		{Start: 0x192e000, End: 0x19c8000, Offset: 0x152e000, Perms: "rw-p", Path: "/usr/bin/kernel exporter"},
		{Start: 0x19c8000, End: 0x3a17000, Perms: "rw-p"},
		{Start: 0x7ffe2b76f000, End: 0x7ffe2b790000, Perms: "rw-p", Path: "[stack]"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Parse =\n%+v\nwant\n%+v", got, want)
	}
	if !got[0].Exec() || got[0].Writable() || got[1].Exec() || !got[2].Writable() {
		t.Error("permissions misread")
	}
}

// FuzzParse: no panic, and every mapping ends at or after its start.
func FuzzParse(f *testing.F) {
	f.Add([]byte(sample))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, m := range Parse(data) {
			if m.End < m.Start {
				t.Fatalf("mapping %+v ends before it starts", m)
			}
		}
	})
}
