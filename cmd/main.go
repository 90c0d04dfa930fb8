//go:build kubebuilder

// The manager is cmd/manager (its main.go wires every controller and webhook). This file is
// never built: kubebuilder's go/v4 plugin refuses to scaffold (`kubebuilder create api`) until
// cmd/main.go exists, and it has no scaffold markers, so kubebuilder adds nothing here. Wire a
// scaffolded kind into cmd/manager/main.go by hand (docs/development.md, "Scaffolding").
package main
