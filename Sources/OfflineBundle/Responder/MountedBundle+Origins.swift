extension MountedBundle {
    /// The origins (`scheme://host[:port]`) the bundle's request keys belong to, sorted.
    public var origins: [String] {
        var seen = Set<String>()
        for i in 0..<index.entryCount {
            if let origin = keyOrigin(key(ofEntryAt: i))?.origin { seen.insert(String(origin)) }
        }
        return seen.sorted()
    }
}
