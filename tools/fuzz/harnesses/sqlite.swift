// libFuzzer harness: the rosbag2 sqlite3 (.db3) reader on arbitrary database files.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    readBagEveryWay(data, size, asFileEndingIn: "db3")
    return 0
}
