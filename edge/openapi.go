package edge

import _ "embed"

// openAPIDoc is served verbatim at GET /v1/openapi.yaml. It is embedded, not
// generated, so the document the tests validate against is byte for byte the
// one clients download.
//
//go:embed openapi.yaml
var openAPIDoc []byte
