module github.com/stepfork/stepfork/examples

go 1.26.0

require (
	github.com/google/uuid v1.6.0
	github.com/openai/openai-go/v3 v3.98.0
	github.com/stepfork/stepfork v0.0.0
)

require (
	github.com/coder/websocket v1.8.15 // indirect
	github.com/fatih/color v1.18.0 // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/hexops/autogold/v2 v2.3.0 // indirect
	github.com/hexops/gotextdiff v1.0.3 // indirect
	github.com/hexops/valast v1.4.4 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/nightlyone/lockfile v1.0.0 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	golang.org/x/mod v0.23.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
	golang.org/x/tools v0.30.0 // indirect
	mvdan.cc/gofumpt v0.7.0 // indirect
)

replace github.com/stepfork/stepfork => ../
