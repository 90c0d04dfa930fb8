package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times: 100 on every Linux
// architecture Go supports (reading it properly needs sysconf, i.e. cgo).
const clockTicks = 100

// Process roles of cpuTimes: the processes' command names, but the trivial server's, which
// is this same binary.
const (
	roleManager   = "manager"
	roleAPIServer = "kube-apiserver"
	roleEtcd      = "etcd"
	roleTrivial   = "trivial"
	roleBench     = "bench"
	// rolePostgres is the bench's PostgreSQL: its server's processes, children of the
	// postmaster (itself the bench's child, "postgres"), which readCPU does not count.
	rolePostgres = "postgres"
)

// cpuTimes are CPU time (user + system) by process role: "manager", "kube-apiserver",
// "etcd", "trivial" and "bench". On a shared machine, CPU time spent per request is a steadier
// measure of cost than requests per second, which also depend on everyone else's load.
type cpuTimes map[string]time.Duration

// readCPU reads the CPU time of the bench and of every process it started (envtest starts
// etcd and kube-apiserver as its children; the manager and trivial server are too).
func (b *bench) readCPU() cpuTimes {
	self := os.Getpid()
	out := cpuTimes{roleBench: procCPU(strconv.Itoa(self))}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		comm, fields, ok := parseStat(string(data))
		if !ok || fields[1] != strconv.Itoa(self) {
			continue
		}
		role := comm
		if b.trivial != nil && filepath.Base(filepath.Dir(path)) == strconv.Itoa(b.trivial.pid()) {
			role = roleTrivial
		}
		out[role] += statCPU(fields)
	}
	return out
}

// parseStat splits /proc/<pid>/stat into the command name and the fields after it (state is
// fields[0], ppid fields[1], utime fields[11], stime fields[12]). The name may hold spaces
// and parentheses, so it ends at the last ')'.
func parseStat(stat string) (string, []string, bool) {
	open, closing := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || closing < open {
		return "", nil, false
	}
	fields := strings.Fields(stat[closing+1:])
	if len(fields) < 13 {
		return "", nil, false
	}
	return stat[open+1 : closing], fields, true
}

func statCPU(fields []string) time.Duration {
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / clockTicks
}

func procCPU(pid string) time.Duration {
	data, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	_, fields, ok := parseStat(string(data))
	if !ok {
		return 0
	}
	return statCPU(fields)
}

// since is the CPU time used from before to now, by role.
func (c cpuTimes) since(before cpuTimes) cpuTimes {
	out := cpuTimes{}
	for role, d := range c {
		out[role] = d - before[role]
	}
	return out
}

func (c cpuTimes) add(other cpuTimes) {
	for role, d := range other {
		c[role] += d
	}
}

// perUnitMS is CPU milliseconds per unit of work, by role.
func (c cpuTimes) perUnitMS(n float64) map[string]float64 {
	out := map[string]float64{}
	for role, d := range c {
		out[role] = round3(ms(d) / n)
	}
	return out
}

func (c cpuTimes) total() time.Duration {
	var t time.Duration
	for _, d := range c {
		t += d
	}
	return t
}

// postgresCPU is the CPU time of the bench's PostgreSQL's server processes (its connections'
// backends, the checkpointer, the WAL writer ...): the children of the bench's "postgres"
// child. A backend that exited meanwhile takes its time with it: the pools keep theirs open.
func postgresCPU() time.Duration {
	self := strconv.Itoa(os.Getpid())
	type proc struct {
		ppid string
		comm string
		cpu  time.Duration
	}
	procs := map[string]proc{}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		comm, fields, ok := parseStat(string(data))
		if ok {
			procs[filepath.Base(filepath.Dir(path))] = proc{ppid: fields[1], comm: comm, cpu: statCPU(fields)}
		}
	}
	var total time.Duration
	for _, p := range procs {
		if parent, ok := procs[p.ppid]; ok && parent.ppid == self && parent.comm == "postgres" {
			total += p.cpu
		}
	}
	return total
}

// schedCPU is a process's CPU time in nanoseconds, the sum over its threads of
// /proc/<pid>/task/<tid>/schedstat's first field: finer than /proc/<pid>/stat's ticks (10 ms),
// which is what a few milliseconds of CPU a second, over seconds, needs. A thread that exited
// meanwhile takes its time with it (Go keeps its threads). ok is false where there is no
// schedstat (another system, a kernel without it).
func schedCPU(pid int) (time.Duration, bool) {
	paths, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/[0-9]*/schedstat", pid))
	if len(paths) == 0 {
		return 0, false
	}
	var total time.Duration
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		fields := strings.Fields(string(data))
		if len(fields) == 0 {
			continue
		}
		ns, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return 0, false
		}
		total += time.Duration(ns)
	}
	return total, true
}
