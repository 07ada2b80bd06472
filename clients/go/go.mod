module github.com/idcar/idcar/clients/go

go 1.19
