"use strict";
// The API's resources, hand-written to match the served OpenAPI document
// (GET /v1/openapi.yaml, edge/openapi.yaml): one declaration per schema of
// components.schemas, with the schema's name (Error is ErrorResponse here, so
// as not to shadow the global Error). test/openapi.test.js reads these
// declarations with the TypeScript compiler and compares their properties,
// required-ness and enums with the document the edge serves.
Object.defineProperty(exports, "__esModule", { value: true });
