// libFuzzer harness: the MCAP reader (summary, indexes, chunks with zstd and lz4, CRCs), with and
// without salvage, through a file as the reader maps it.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    readBagEveryWay(data, size, asFileEndingIn: "mcap")
    return 0
}
