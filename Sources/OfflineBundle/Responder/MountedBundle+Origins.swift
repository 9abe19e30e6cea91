extension MountedBundle {
    /// The origins (`scheme://host[:port]`) the bundle's request keys belong to, sorted.
    public var origins: [String] {
        var seen = Set<String>()
        for i in 0..<index.entryCount {
            let key = key(ofEntryAt: i)
            guard let schemeEnd = key.range(of: "://") else { continue }
            let rest = key[schemeEnd.upperBound...]
            let end = rest.firstIndex(of: "/") ?? rest.endIndex
            seen.insert(String(key[..<end]))
        }
        return seen.sorted()
    }
}
