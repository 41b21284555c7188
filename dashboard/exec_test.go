package dashboard_test

import "os/exec"

var execCommand = exec.CommandContext

type exitError = exec.ExitError
