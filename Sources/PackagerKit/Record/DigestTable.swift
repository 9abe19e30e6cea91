/// A table from digests (the first 16 bytes of a SHA-256: ``ExchangeImport/KeyDigest``) to small values, for the
/// tables an import keeps one entry in per exchange: open addressing in two flat arrays, filled to 7/8 before it
/// doubles. A `Dictionary` fills to 3/4: for 200,000 names of 16 bytes and a 4-byte value it needs 524,288 buckets
/// (10.5 MB of keys and values) and held half as many again while it doubled, at the peak of a 100,000-record WARC
/// import; this needs 262,144 slots (5.2 MB).
struct DigestTable<Value> {
    typealias Key = ExchangeImport.KeyDigest

    /// The slots' keys; an empty slot holds the all-zero key, whose own value (a digest of zeros) is kept apart.
    private var keys: [Key]
    private var values: [Value]
    private var zeroKeyValue: Value?
    /// What an empty slot's value is set to.
    private let filler: Value
    private(set) var count = 0

    private static var empty: Key { Key(high: 0, low: 0) }

    /// An empty table; `filler` is the value empty slots hold.
    init(filler: Value) {
        self.filler = filler
        keys = [Key](repeating: Self.empty, count: 1024)
        values = [Value](repeating: filler, count: 1024)
    }

    subscript(key: Key) -> Value? {
        get {
            if key == Self.empty { return zeroKeyValue }
            let mask = keys.count - 1
            var slot = Int(truncatingIfNeeded: key.low) & mask
            while keys[slot] != Self.empty {
                if keys[slot] == key { return values[slot] }
                slot = (slot + 1) & mask
            }
            return nil
        }
        set {
            // Values are only added or replaced (an import never removes a name).
            guard let newValue else { preconditionFailure("DigestTable does not remove") }
            if key == Self.empty {
                if zeroKeyValue == nil { count += 1 }
                zeroKeyValue = newValue
                return
            }
            if (count + 1) * 8 > keys.count * 7 { grow() }
            let mask = keys.count - 1
            var slot = Int(truncatingIfNeeded: key.low) & mask
            while keys[slot] != Self.empty {
                if keys[slot] == key {
                    values[slot] = newValue
                    return
                }
                slot = (slot + 1) & mask
            }
            keys[slot] = key
            values[slot] = newValue
            count += 1
        }
    }

    /// Twice the slots, every key placed again.
    private mutating func grow() {
        let (oldKeys, oldValues) = (keys, values)
        keys = [Key](repeating: Self.empty, count: oldKeys.count * 2)
        values = [Value](repeating: filler, count: oldKeys.count * 2)
        let mask = keys.count - 1
        for i in oldKeys.indices where oldKeys[i] != Self.empty {
            var slot = Int(truncatingIfNeeded: oldKeys[i].low) & mask
            while keys[slot] != Self.empty { slot = (slot + 1) & mask }
            keys[slot] = oldKeys[i]
            values[slot] = oldValues[i]
        }
    }
}
