//go:build !linux

package main

import "syscall"

// childProcAttr puts a child in its own process group (the bench stops it on Ctrl-C).
func childProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
