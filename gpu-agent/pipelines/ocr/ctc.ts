/** A decoded text line and its confidence. */
export interface DecodedText {
  text: string;
  /** Mean of the kept characters' probabilities; 0 when nothing was kept. */
  score: number;
}

/**
 * Greedy CTC decoding as PaddleOCR's CTCLabelDecode does it: take the most likely class at
 * each time step, collapse repeats, drop the blank (class 0).
 *
 * `probabilities` is one sequence, `steps` x `classes`, row-major (already softmaxed).
 * `charset[i]` is the character for class `i`, with `charset[0]` the blank.
 */
export function ctcGreedyDecode(
  probabilities: Float32Array,
  steps: number,
  classes: number,
  charset: readonly string[],
  offset = 0,
): DecodedText {
  let text = "";
  let scoreSum = 0;
  let kept = 0;
  let previous = -1;
  for (let step = 0; step < steps; step++) {
    const row = offset + step * classes;
    let best = 0;
    let bestProbability = probabilities[row]!;
    for (let c = 1; c < classes; c++) {
      const probability = probabilities[row + c]!;
      if (probability > bestProbability) {
        best = c;
        bestProbability = probability;
      }
    }
    if (best !== 0 && best !== previous) {
      text += charset[best] ?? "";
      scoreSum += bestProbability;
      kept++;
    }
    previous = best;
  }
  return { text, score: kept === 0 ? 0 : scoreSum / kept };
}
