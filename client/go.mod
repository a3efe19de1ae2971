module github.com/mayfly/mayfly/client

go 1.26.8
