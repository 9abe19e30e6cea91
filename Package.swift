// swift-tools-version: 6.1
import Foundation
import PackageDescription

let package = Package(
    name: "packager",
    // macOS 15: the runtime's locks are the standard library's `Mutex` (Synchronization).
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "OfflineBundle", targets: ["OfflineBundle"]),
        .library(name: "OfflineBundleHummingbird", targets: ["OfflineBundleHummingbird"]),
        .library(name: "OfflineBundleServing", targets: ["OfflineBundleServing"]),
        .library(name: "OfflineBundleHTTPClient", targets: ["OfflineBundleHTTPClient"]),
        .library(name: "OfflineBundleURLSession", targets: ["OfflineBundleURLSession"]),
        .library(name: "OfflineBundleVapor", targets: ["OfflineBundleVapor"]),
        .library(name: "OfflineBundleOpenAPI", targets: ["OfflineBundleOpenAPI"]),
        .library(name: "OfflineBundleConfiguration", targets: ["OfflineBundleConfiguration"]),
        .library(name: "PackagerKit", targets: ["PackagerKit"]),
        .executable(name: "packager", targets: ["packager"]),
        .plugin(name: "PackagerCommand", targets: ["PackagerCommand"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-http2", from: "1.46.0"),
        .package(url: "https://github.com/jpsim/Yams", "5.0.1"..<"7.0.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/hummingbird-project/swift-mustache", from: "2.1.1"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/vapor/vapor", from: "4.122.3"),
        // Generated OpenAPI clients' transport protocol, for OfflineBundleOpenAPI (HTTPTypes only besides).
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        // Settings from the environment and files (JSON, and YAML through the Yams the declarations use already).
        .package(url: "https://github.com/apple/swift-configuration", from: "1.4.0", traits: [.defaults, "YAML"]),
        // Spans for the loader's answers, and the in-memory tracer that tests them.
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.1.0"),
        // The tests' network for it: a real ClientTransport the bundle's answers stand in front of.
        .package(url: "https://github.com/apple/swift-openapi-urlsession", from: "1.4.0"),
        // The CLI's /metrics: the Prometheus text format as swift-metrics' backend (serve --admin-port).
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
    ],
    targets: [
        // zlib: the only C library the runtime links.
        .systemLibrary(
            name: "CZlib",
            providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
        ),
        // The calling dispatch queue, for the URLSession protocol on swift-corelibs-foundation (no library to link).
        .systemLibrary(name: "CDispatchQueue"),
        // glibc's malloc_trim, for the writer (no library to link).
        .systemLibrary(name: "CMalloc"),
        // libdeflate: build side only (the writer's whole-buffer deflate; the runtime inflates with zlib).
        .systemLibrary(
            name: "CLibDeflate",
            providers: [.apt(["libdeflate-dev"]), .brew(["libdeflate"])]
        ),
        // libarchive: build side only (extract, inspect, pack from archives, export).
        .systemLibrary(
            name: "CArchive",
            providers: [.apt(["libarchive-dev"]), .brew(["libarchive"])]
        ),
        // The runtime that services import: format model, ZIP reader, index, lookup.
        .target(
            name: "OfflineBundle",
            dependencies: [
                "CZlib",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                // Runtime rules files are YAML, in the declaration's syntax.
                .product(name: "Yams", package: "Yams"),
                // The reloader is a service-lifecycle Service (no NIO: the package needs swift-log and async-algorithms).
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                // Spans for the loader's step (a no-op tracer unless a service bootstraps one).
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // The URLProtocol for URLSession; apart, since on Linux it links FoundationNetworking (and libcurl).
        .target(
            name: "OfflineBundleURLSession",
            dependencies: [
                "OfflineBundle",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .target(name: "CDispatchQueue", condition: .when(platforms: [.linux, .android, .windows, .openbsd])),
            ]
        ),
        // Hummingbird middleware that serves a mounted bundle; apart, so the runtime never pulls in NIO, and light: a service
        // that wants only the middleware compiles neither TLS nor HTTP/2.
        .target(
            name: "OfflineBundleHummingbird",
            dependencies: [
                "OfflineBundle",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // Servers of bundles: the SwiftNIO channel server (HTTP/1.1, and HTTPS with HTTP/2 by ALPN); what `packager serve`
        // runs, for services that run a bundle server of their own. NIO only: no web framework.
        .target(
            name: "OfflineBundleServing",
            dependencies: [
                "OfflineBundle",
                "HTTPFieldsNIO",
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // The one conversion between NIO's HTTPHeaders and the runtime's HTTPFields, for the modules over NIO (not a product).
        .target(
            name: "HTTPFieldsNIO",
            dependencies: [
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ]
        ),
        // A Hummingbird server run in the background, for the demo, the tests' origins and the benchmark (not a product).
        .target(
            name: "HummingbirdLauncher",
            dependencies: [
                "OfflineBundleServing",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdHTTP2", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ]
        ),
        // Vapor 4: the middleware that serves a mounted bundle and the `Client` that answers `req.client` from one; apart,
        // so that only a Vapor service compiles Vapor.
        .target(
            name: "OfflineBundleVapor",
            dependencies: [
                "OfflineBundle",
                "OfflineBundleHTTPClient",
                "HTTPFieldsNIO",
                .product(name: "Vapor", package: "vapor"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // AsyncHTTPClient wrapper that answers from a bundle by policy, and the transport that mounts remote bundles.
        .target(
            name: "OfflineBundleHTTPClient",
            dependencies: [
                "OfflineBundle",
                "HTTPFieldsNIO",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // A swift-openapi-runtime ClientTransport answered from bundles: the runtime and HTTPTypes, nothing of NIO.
        .target(
            name: "OfflineBundleOpenAPI",
            dependencies: [
                "OfflineBundle",
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        // A loader from swift-configuration's providers (the environment, JSON files): that package only.
        .target(
            name: "OfflineBundleConfiguration",
            dependencies: ["OfflineBundle", .product(name: "Configuration", package: "swift-configuration")]
        ),
        // The build side: writer, packer, checker, libarchive edges.
        .target(
            name: "PackagerKit",
            dependencies: [
                "OfflineBundle",
                "CZlib",
                "CLibDeflate",
                "CArchive",
                "CMalloc",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Mustache", package: "swift-mustache"),
            ],
            resources: [.embedInCode("Resources/packager.yml"), .embedInCode("Resources/verify-report.html.mustache")]
        ),
        .executableTarget(
            name: "packager",
            dependencies: [
                "PackagerKit",
                "CMalloc",
                "OfflineBundle",
                "OfflineBundleHummingbird",
                "OfflineBundleServing",
                "HummingbirdLauncher",
                "OfflineBundleHTTPClient",
                "OfflineBundleConfiguration",
                .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // `swift package packager build|verify|…`: the CLI, run in the package that asks (a bundle into a target's resources).
        .plugin(
            name: "PackagerCommand",
            capability: .command(
                intent: .custom(
                    verb: "packager", description: "Build a declared offline bundle into a target's resources, verify one, or run any packager command"),
                permissions: [
                    .allowNetworkConnections(scope: .all(), reason: "build fetches the declared URLs; verify asks their servers"),
                    .writeToPackageDirectory(reason: "build writes the bundle into the package (a target's OfflineBundles folder)"),
                ]
            )
        ),
        // Helpers both test targets share: temporary folders, running tools, sample sites.
        .target(
            name: "TestSupport",
            dependencies: [
                "PackagerKit", "OfflineBundle", "OfflineBundleServing", "OfflineBundleHTTPClient", "HummingbirdLauncher",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            path: "Tests/TestSupport"
        ),
        .testTarget(
            name: "OfflineBundleTests",
            dependencies: [
                "OfflineBundle", "PackagerKit", "TestSupport", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "PackagerKitTests",
            dependencies: [
                "PackagerKit", "OfflineBundle", "TestSupport", .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .testTarget(
            name: "OfflineBundleHummingbirdTests",
            dependencies: [
                "OfflineBundleHummingbird", "OfflineBundleServing", "OfflineBundle", "TestSupport", "HummingbirdLauncher",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOHPACK", package: "swift-nio-http2"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTP2", package: "swift-nio-http2"),
            ]
        ),
        .testTarget(
            name: "OfflineBundleHTTPClientTests",
            dependencies: [
                "OfflineBundleHTTPClient", "OfflineBundleServing", "OfflineBundle", "PackagerKit", "TestSupport",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "OfflineBundleVaporTests",
            dependencies: [
                "OfflineBundleVapor", "OfflineBundleServing", "OfflineBundle", "PackagerKit", "TestSupport",
                .product(name: "Vapor", package: "vapor"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "OfflineBundleOpenAPITests",
            dependencies: [
                "OfflineBundleOpenAPI", "OfflineBundle", "TestSupport",
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIURLSession", package: "swift-openapi-urlsession"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ]
        ),
        .testTarget(
            name: "OfflineBundleConfigurationTests",
            dependencies: [
                "OfflineBundleConfiguration", "OfflineBundle", "TestSupport", .product(name: "Configuration", package: "swift-configuration"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        .testTarget(
            name: "OfflineBundleURLSessionTests",
            dependencies: [
                "OfflineBundleURLSession", "OfflineBundle", "PackagerKit", "TestSupport",
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The benchmark executables are built only for `make bench` (PACKAGER_BENCHMARKS=1), so a service that depends on
// this package never sees them.
if ProcessInfo.processInfo.environment["PACKAGER_BENCHMARKS"] != nil {
    package.targets += [
        .executableTarget(
            name: "packager-bench",
            dependencies: ["OfflineBundle", "OfflineBundleHTTPClient"],
            path: "Sources/PackagerBench"
        ),
        // The serve benchmark's peers: Hummingbird's FileMiddleware serving files from disk, and the ceilings of
        // Hummingbird and of SwiftNIO's HTTP/1 server answering a fixed body.
        .executableTarget(
            name: "packager-bench-fileserver",
            dependencies: [
                "HummingbirdLauncher", .product(name: "Hummingbird", package: "hummingbird"), .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            path: "Sources/PackagerBenchFileServer"
        ),
        // The Vapor rows: OfflineBundleVapor's middleware, and Vapor's FileMiddleware serving the same files.
        .executableTarget(
            name: "packager-bench-vapor",
            dependencies: ["OfflineBundle", "OfflineBundleVapor", .product(name: "Vapor", package: "vapor")],
            path: "Sources/PackagerBenchVapor"
        ),
    ]
}
