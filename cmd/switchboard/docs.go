package main

// The reference pages docs/cli/*.md (one per command, with every flag) and
// docs/configuration.md (every key of the configuration, its variables,
// flags and default) are written from the commands and the config package
// by TestGeneratedDocs, which fails when the committed pages differ from
// what this program's commands produce.
//
//go:generate go test -run TestGeneratedDocs -args -update
