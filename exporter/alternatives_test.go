// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"reflect"
	"testing"
)

func TestParseAttachTo(t *testing.T) {
	srcs := []Source{{Name: "funclatency"}, {Name: "mine", Dir: "/etc/x"}}
	got, err := ParseAttachTo([]string{"funclatency=vfs_read", "mine.prog_a=tcp_sendmsg", "funclatency.funclatency_kprobe=vfs_write"}, srcs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"funclatency": {"vfs_read", "funclatency_kprobe=vfs_write"},
		"mine":        {"prog_a=tcp_sendmsg"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	for v, msg := range map[string]string{
		"funclatency":        `--attach.to "funclatency": want <config>=<function> or <config>.<program>=<function>`,
		"=vfs_read":          `--attach.to "=vfs_read": want <config>=<function> or <config>.<program>=<function>`,
		"funccount=vfs_read": `--attach.to "funccount=vfs_read": config "funccount" is not being started`,
	} {
		if _, err := ParseAttachTo([]string{v}, srcs); err == nil || err.Error() != msg {
			t.Errorf("%q: error %v, want %s", v, err, msg)
		}
	}
}
