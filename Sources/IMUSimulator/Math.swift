#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

// Local names for libm so the scenario types need not import the platform module everywhere.
@inlinable func _sin(_ x: Double) -> Double { sin(x) }
@inlinable func _cos(_ x: Double) -> Double { cos(x) }
