// "Did you mean": the nearest known name to a mistyped one, for every error that names a name.

/// The nearest of `candidates` to `word`, if it is near enough to be a likely typo.
public func nearest(_ word: String, in candidates: [String]) -> String? {
    let scored = candidates.map { ($0, editDistance(word.lowercased(), $0.lowercased())) }
    guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
    let allowed = max(1, min(3, best.0.count / 3))
    return best.1 <= allowed ? best.0 : nil
}

/// " (did you mean 'x'?)" or "".
public func didYouMean(_ word: String, in candidates: [String]) -> String {
    nearest(word, in: candidates).map { " (did you mean '\($0)'?)" } ?? ""
}

/// Levenshtein distance with adjacent transpositions counted as one edit.
public func editDistance(_ a: String, _ b: String) -> Int {
    let x = Array(a), y = Array(b)
    if x.isEmpty || y.isEmpty { return max(x.count, y.count) }
    var d = [[Int]](repeating: [Int](repeating: 0, count: y.count + 1), count: x.count + 1)
    for i in 0...x.count { d[i][0] = i }
    for j in 0...y.count { d[0][j] = j }
    for i in 1...x.count {
        for j in 1...y.count {
            let cost = x[i - 1] == y[j - 1] ? 0 : 1
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1, j > 1, x[i - 1] == y[j - 2], x[i - 2] == y[j - 1] { d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1) }
        }
    }
    return d[x.count][y.count]
}
