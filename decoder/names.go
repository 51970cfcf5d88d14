// SPDX-License-Identifier: Apache-2.0

package decoder

// Name methods: each decoder reports its registered name (see Named), which
// DecodeError carries and the exporter's decoder error metric is labelled by.

func (*cgroupDecoder) Name() string  { return "cgroup" }
func (dnameDecoder) Name() string    { return "dname" }
func (*errnoDecoder) Name() string   { return "errno" }
func (*hexDecoder) Name() string     { return "hex" }
func (*ifnameDecoder) Name() string  { return "ifname" }
func (*inetIP) Name() string         { return "inet_ip" }
func (*kstackDecoder) Name() string  { return "kstack" }
func (*ksymDecoder) Name() string    { return "ksym" }
func (*majorMinor) Name() string     { return "majorminor" }
func (*regexpFilter) Name() string   { return "regexp" }
func (*staticMap) Name() string      { return "static_map" }
func (stringDecoder) Name() string   { return "string" }
func (*signalDecoder) Name() string  { return "signal" }
func (*syscallDecoder) Name() string { return "syscall" }
func (*uintDecoder) Name() string    { return "uint" }

func (d *pciDecoder) Name() string { return d.name }
