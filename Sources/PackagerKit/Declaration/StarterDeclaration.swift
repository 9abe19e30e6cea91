/// The commented starter declaration `packager init` writes (Templates/packager.yml, embedded at build time).
public enum StarterDeclaration {
    /// The template's text.
    public static var text: String { String(decoding: PackageResources.packager_yml, as: UTF8.self) }
}
