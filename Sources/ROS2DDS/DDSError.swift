import CCycloneDDS

/// A Cyclone DDS call that failed, with what was being done.
public struct DDSError: Error, CustomStringConvertible {
    public let operation: String
    public let code: Int32
    /// A reliable write gave up after its maximum blocking time (a matched reader is behind).
    public var isTimeout: Bool { code == DDS_RETCODE_TIMEOUT }

    public var description: String {
        "\(operation): \(String(cString: dds_strretcode(code))) (DDS return code \(code))"
    }

    /// `result` when it is a valid entity or count, else throws naming `operation`.
    @discardableResult
    static func check(_ result: Int32, _ operation: @autoclosure () -> String) throws(DDSError) -> Int32 {
        guard result >= 0 else { throw DDSError(operation: operation(), code: result) }
        return result
    }
}
