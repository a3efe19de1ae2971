module github.com/mayfly/mayfly/clients/go

go 1.23.0
