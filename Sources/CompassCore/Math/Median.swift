/// The median of the finite values; NaN when there are none.
func finiteMedian(_ all: [Double]) -> Double {
    let values = all.filter(\.isFinite).sorted()
    guard !values.isEmpty else { return .nan }
    let mid = values.count / 2
    return values.count % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2
}

/// A robust spread of misses from a fit: 1.4826 x their median, the RMS were they Gaussian, which a few
/// readings far off (a magnet passed by) do not move.
func robustScale(_ misses: [Double]) -> Double { 1.4826 * finiteMedian(misses) }
