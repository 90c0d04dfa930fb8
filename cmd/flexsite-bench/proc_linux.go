//go:build linux

package main

import "syscall"

// childProcAttr puts a child in its own process group and has the kernel kill it when the
// bench dies, so that even a `kill -9` of the bench leaves no manager behind.
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
