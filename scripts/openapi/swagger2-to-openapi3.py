#!/usr/bin/env python3
"""Rewrites a Swagger 2.0 document as OpenAPI 3.0.3, for swift-openapi-generator (which reads 3.0 and 3.1 only).

Kinto (and every service built on cornice_swagger) describes its API in Swagger 2.0 at /v1/__api__. This converts
what such a document holds, and refuses what it does not handle rather than guess:

- `host`, `basePath` and `schemes` become `servers` (with --relative-server, the base path alone, so no test port is
  written into generated code);
- a `body` parameter becomes the `requestBody`, one media type per `consumes` (application/json when none);
- every other parameter keeps its place (`query`, `header`, `path`), its type keys moving under `schema`; a query
  array stays comma-separated (`explode: false`) unless it was `multi`;
- a response's `schema` goes under `content`, one media type per `produces`; its `headers` get a `schema` too;
- an integer bound outside 64 bits (Kinto writes `maximum: 2^63`) is clamped to the 64-bit range;
- `definitions` become `components/schemas`, `securityDefinitions` become `components/securitySchemes`, and every
  `$ref` is pointed at its new place; `x-nullable` becomes `nullable`.

Usage: swagger2-to-openapi3.py IN.json OUT.json [--relative-server]
"""

import json
import sys

SCHEMA_KEYS = {
    "type", "format", "items", "enum", "default", "maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems", "multipleOf",
}


def fail(message):
    sys.exit("swagger2-to-openapi3: " + message)


def schema(node):
    """A Swagger schema as an OpenAPI 3.0 schema: references moved, x-nullable spelled as 3.0 does."""
    if isinstance(node, list):
        return [schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key == "$ref":
            if not value.startswith("#/definitions/"):
                fail(f"a reference outside #/definitions: {value}")
            out[key] = "#/components/schemas/" + value[len("#/definitions/"):]
        elif key == "x-nullable":
            out["nullable"] = value
        elif key in ("maximum", "minimum") and isinstance(value, int) and not -(2**63) <= value < 2**63:
            # Kinto bounds its integers by 2^63, one past what a 64-bit integer holds (and what generators read).
            out[key] = max(-(2**63), min(value, 2**63 - 1))
        elif key == "type" and value == "file":
            fail("a file schema (multipart upload) is not converted")
        elif key in ("properties", "patternProperties", "definitions"):
            out[key] = {name: schema(child) for name, child in value.items()}
        else:
            out[key] = schema(value)
    return out


def parameter(node, where):
    if "$ref" in node:
        fail(f"{where}: a parameter reference is not converted")
    kind = node.get("in")
    if kind == "formData":
        fail(f"{where}: formData parameter {node.get('name')} is not converted")
    out = {key: value for key, value in node.items() if key not in SCHEMA_KEYS and key not in ("collectionFormat", "allowEmptyValue")}
    out["schema"] = schema({key: value for key, value in node.items() if key in SCHEMA_KEYS})
    # Swagger's arrays are comma-separated unless `multi` (one name=value per item); OpenAPI 3.0's default is the latter.
    if node.get("collectionFormat") == "multi":
        out["style"], out["explode"] = "form", True
    elif node.get("collectionFormat") not in (None, "csv"):
        fail(f"{where}: collectionFormat {node['collectionFormat']} is not converted")
    elif node.get("type") == "array" and kind == "query":
        out["style"], out["explode"] = "form", False
    if kind == "path":
        out["required"] = True
    return out


def response(node, produces, where):
    if "$ref" in node:
        fail(f"{where}: a response reference is not converted")
    out = {"description": node.get("description", "")}
    if "schema" in node:
        out["content"] = {media: {"schema": schema(node["schema"])} for media in produces}
    if "headers" in node:
        out["headers"] = {
            name: {"description": header.get("description", ""), "schema": schema({k: v for k, v in header.items() if k in SCHEMA_KEYS})}
            for name, header in node["headers"].items()
        }
    return out


def operation(node, document, where, shared):
    out = {key: value for key, value in node.items() if key not in ("parameters", "responses", "consumes", "produces", "schemes")}
    consumes = node.get("consumes") or document.get("consumes") or ["application/json"]
    produces = node.get("produces") or document.get("produces") or ["application/json"]
    parameters, body = [], None
    names = {(p["in"], p["name"]) for p in node.get("parameters", [])}
    for item in [p for p in shared if (p["in"], p["name"]) not in names] + node.get("parameters", []):
        if item.get("in") == "body":
            body = {"content": {media: {"schema": schema(item.get("schema", {}))} for media in consumes}}
            if item.get("required"):
                body["required"] = True
            if item.get("description"):
                body["description"] = item["description"]
        else:
            parameters.append(parameter(item, where))
    if parameters:
        out["parameters"] = parameters
    if body:
        out["requestBody"] = body
    out["responses"] = {status: response(answer, produces, f"{where} {status}") for status, answer in node.get("responses", {}).items()}
    return out


def convert(document, relative_server):
    if document.get("swagger") != "2.0":
        fail(f"not a Swagger 2.0 document (swagger: {document.get('swagger')!r})")
    base = document.get("basePath", "/")
    if relative_server:
        servers = [{"url": base}]
    else:
        host = document.get("host") or fail("no host: give --relative-server")
        servers = [{"url": f"{scheme}://{host}{base}"} for scheme in document.get("schemes", ["https"])]
    out = {"openapi": "3.0.3", "info": document["info"], "servers": servers}
    if "tags" in document:
        out["tags"] = document["tags"]
    paths = {}
    for path, item in document.get("paths", {}).items():
        shared = item.get("parameters", [])
        converted = {}
        for method, node in item.items():
            if method == "parameters":
                continue
            converted[method] = operation(node, document, f"{method.upper()} {path}", shared)
        paths[path] = converted
    out["paths"] = paths
    components = {}
    if document.get("definitions"):
        components["schemas"] = {name: schema(node) for name, node in document["definitions"].items()}
    schemes = {}
    for name, node in document.get("securityDefinitions", {}).items():
        if node.get("type") == "basic":
            schemes[name] = {"type": "http", "scheme": "basic"}
        elif node.get("type") == "apiKey":
            schemes[name] = {"type": "apiKey", "name": node["name"], "in": node["in"]}
        else:
            fail(f"security scheme {name} of type {node.get('type')} is not converted")
    if schemes:
        components["securitySchemes"] = schemes
    if components:
        out["components"] = components
    if "security" in document:
        out["security"] = document["security"]
    return out


def main():
    arguments = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(arguments) != 2:
        sys.exit(__doc__)
    with open(arguments[0]) as source:
        document = json.load(source)
    converted = convert(document, "--relative-server" in sys.argv)
    with open(arguments[1], "w") as out:
        json.dump(converted, out, indent=1, sort_keys=True)
        out.write("\n")


if __name__ == "__main__":
    main()
