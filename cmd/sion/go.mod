module github.com/sion-go/sion/cmd/sion

go 1.26.0

require (
	github.com/sion-go/sion v0.0.0
	github.com/sion-go/sion/manage v0.0.0
	github.com/stretchr/testify v1.12.1
)

require (
	github.com/antchfx/xmlquery v1.5.2 // indirect
	github.com/antchfx/xpath v1.3.9 // indirect
	github.com/golang/groupcache v0.0.0-20210331224755-41bb18bfe9da // indirect
	github.com/tidwall/gjson v1.20.3 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.3.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/net v0.62.0 // indirect
	golang.org/x/text v0.43.0 // indirect
)

replace github.com/sion-go/sion => ../../

replace github.com/sion-go/sion/manage => ../../manage
