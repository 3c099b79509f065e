/// What this binary was built from. The values come from `BuildInfo.generated.swift`, which the
/// BuildInfoPlugin writes on every build where CHANGELOG.md or the git HEAD changed.
public enum BuildInfo {
    /// The first numbered heading of CHANGELOG.md (`## [X.Y.Z] - ...`): the one place the version is declared.
    public static var version: String { generatedVersion }
    /// The abbreviated git commit of the checkout ("unknown" outside a git checkout).
    public static var commit: String { generatedCommit }
}
