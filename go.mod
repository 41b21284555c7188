module github.com/switchboard-io/switchboard

go 1.26.8
