/// Parameters of `GravityAidedHardIronFit`.
public struct GravityAidedFitSettings: Sendable, Equatable {
    /// The field strength expected before anything is known, microtesla, and its 1-sigma spread: the
    /// earth's field is 22-67 uT everywhere, so 45 +- 11 holds it within 2 sigma. A site's World
    /// Magnetic Model strength (with a tenth of it as the spread) is the better prior where known.
    /// Default 45.
    public var expectedStrengthMicrotesla = 45.0
    /// See `expectedStrengthMicrotesla`. Default 11.
    public var strengthSigmaMicrotesla = 11.0
    /// Fewest readings (each with the vertical at its time) a fit uses. Default 40.
    public var minimumReadings = 40
    /// The horizontal part of the field, seen in the sensor frame, must have turned round: the mean
    /// resultant length of its directions at most this (0 = all round, 1 = one direction; half a
    /// circle swept evenly gives 0.64). Default 0.6.
    public var maximumHorizontalResultant = 0.6
    /// A fit is accepted only when its RMS residual (the sphere's and the vertical component's) is at
    /// most this, microtesla: a hand-held sensor carried through a building sees the field's strength
    /// vary by a few microtesla from place to place, and its vertical is known to a few degrees while
    /// it moves (2 degrees of tilt is 1.5 uT at 45 uT). Soft iron, which the fit does not model, is
    /// judged apart (`Solution.softIronStretch`). Default 3.
    public var maximumResidualMicrotesla = 3.0
    /// The horizontal field must have turned through at least this arc, degrees: over less than half a
    /// circle, an arc of an ellipse (soft iron) is matched by a circle with another centre, and the
    /// offset the fit finds is that circle's. Default 180.
    public var minimumArcDegrees = 180.0
    /// A fit is accepted only when the heading error its offset's uncertainty causes over its own
    /// readings (`Solution.headingSigmaDegrees`, soft iron included) is at most this, degrees: a
    /// calibrated compass carried indoors scatters by about 10 degrees (5th to 95th percentile) from
    /// place to place, so an offset that adds 3 (1 sigma) is still worth having. Default 3.
    public var maximumHeadingSigmaDegrees = 3.0
    /// Time constant of the vertical tracked from the gyro and the accelerometer, seconds: the
    /// accelerometer's steps and swings average out over it, while a raw gyro's bias of b tilts it by
    /// about b x this (5 deg/s: 5 degrees). Default 1.
    public var verticalTimeConstantSeconds = 1.0
    public init() {}
}
