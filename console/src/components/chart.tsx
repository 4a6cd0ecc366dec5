import { useEffect, useRef } from "preact/hooks";
import uPlot from "uplot";

/**
 * A time series chart (uPlot): x in seconds since the epoch, one line per series.
 * `data-points` on the figure counts the samples drawn, for tests and screen readers.
 */
export function Chart(props: { label: string; series: string[]; data: number[][] }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | null>(null);
  const colors = ["#2563eb", "#d97706", "#059669", "#dc2626"];

  useEffect(() => {
    if (!box.current) return;
    const chart = new uPlot(
      {
        width: Math.max(320, box.current.clientWidth || 640),
        height: 220,
        series: [
          {},
          ...props.series.map((name, i) => ({
            label: name,
            stroke: colors[i % colors.length] ?? "#333",
            width: 2,
          })),
        ],
        axes: [{}, { label: "" }],
      },
      props.data as uPlot.AlignedData,
      box.current,
    );
    plot.current = chart;
    return () => {
      chart.destroy();
      plot.current = null;
    };
  }, [props.series.join("|")]);

  useEffect(() => {
    plot.current?.setData(props.data as uPlot.AlignedData);
  }, [props.data]);

  return (
    <figure class="chart" aria-label={props.label} data-points={props.data[0]?.length ?? 0}>
      <figcaption>{props.label}</figcaption>
      <div ref={box} />
    </figure>
  );
}
