import Foundation
import OfflineBundle

// Answers the URL given from the bundle this target ships, with the network out of reach: prints the body.
guard CommandLine.arguments.count == 2, let path = Bundle.module.path(forResource: "docs", ofType: "zip", inDirectory: "OfflineBundles") else {
    FileHandle.standardError.write(Data("usage: Docs URL (with OfflineBundles/docs.zip built)\n".utf8))
    exit(2)
}
let loader = try OfflineLoader(path: path, policy: .bundleOnly)
guard let answer = loader.response(for: BundleRequest(method: "GET", url: CommandLine.arguments[1])) else {
    FileHandle.standardError.write(Data("not in the bundle: \(CommandLine.arguments[1])\n".utf8))
    exit(1)
}
FileHandle.standardOutput.write(try answer.bodyData())
