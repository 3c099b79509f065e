/// RIHS01 type hashes (REP-2011) of the types GyroCompass publishes and reads, as Jazzy's rmw puts
/// them in endpoint user data. Filled in by TypeDescriptionHash from the embedded definitions.
enum TypeHashes {
    static let rihs01: [String: String] = [:]
}
