// libFuzzer harness: the pipeline file loader (libyaml, limits, substitution, graph and setting
// validation) on arbitrary text.
import Pipeline

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOne(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    _ = try? PipelineConfig.parse(text, file: "fuzz.yaml", environment: ["BAG": "/nonexistent", "RATE": "2"])
    return 0
}
