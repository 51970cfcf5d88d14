// SPDX-License-Identifier: Apache-2.0

package exporter

import (
	"github.com/kernel-exporter/kernel_exporter/cgroupmap"
	"github.com/kernel-exporter/kernel_exporter/config"
	"github.com/kernel-exporter/kernel_exporter/loader"
)

// startCgroupIDMap fills the config's cgroup_id_map, if it has one, and
// keeps it current (package cgroupmap) until the object is closed. Errors
// (the section's, the map missing or of the wrong shape, the cgroup2
// hierarchy unreadable at start) take the config down.
func (e *Exporter) startCgroupIDMap(cfg *config.Config, obj *loader.Object) error {
	spec, err := cfg.CgroupIDMap()
	if err != nil || spec == nil {
		return err
	}
	f, err := cgroupmap.Start(spec, obj.Collection.Maps[spec.Name], cgroupmap.Options{Config: cfg.Name, Logger: e.log})
	if err != nil {
		return err
	}
	obj.OnClose(f.Stop)
	st := f.Stats()
	e.log.Info("cgroup_id_map filled", "config", cfg.Name, "map", spec.Name, "cgroups", st.Entries, "refresh", cgroupmap.DefaultInterval)
	return nil
}
