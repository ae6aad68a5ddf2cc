// @torchrig/gpu-notice: NVIDIA's GPU dashboard (jupyterlab-nvdashboard) says when there is no GPU.
//
// nvdashboard registers its GPU endpoints only when NVML finds a GPU. Without one (CPU mode) its
// "GPU Dashboards" panel still offers every GPU chart, and each opens empty while its websocket
// fails in the browser console (upstream: rapidsai/jupyterlab-nvdashboard#33). This plugin asks
// nvdashboard's own status endpoint once; when it answers "no GPU", a notice saying so goes at the
// top of the panel and over every GPU chart opened from it. With a GPU, or without an answer, it
// does nothing.
//
// A prebuilt JupyterLab extension written by hand, so the image needs no Node.js build: JupyterLab
// loads this file, then calls window._JUPYTERLAB[name].init() and .get("./extension") (the
// module-federation container protocol, stable since JupyterLab 3). The plugin imports no
// JupyterLab module; it uses only the application object it is activated with.
(function () {
  "use strict";
  const NAME = "@torchrig/gpu-notice";
  const NOTICE =
    "No NVIDIA GPU in this container (CPU mode): the GPU charts have nothing to show. " +
    "Machine Resources still works.";
  const PANEL = "gpu-dashboard"; // nvdashboard's side panel
  const CHARTS = new Set([
    "gpu-memory-widget",
    "gpu-utilization-widget",
    "gpu-resource-widget",
    "pci-throughput-widget",
    "nvlink-throughput-widget",
    "nvlink-throughput-timeseries-widget",
  ]);
  const STYLE =
    "padding: 8px 12px; margin: 8px; border-left: 4px solid var(--jp-warn-color1);" +
    "background: var(--jp-warn-color3); color: var(--jp-ui-font-color1);" +
    "font-size: var(--jp-ui-font-size1); z-index: 1;";

  function addNotice(node, floating) {
    if (node.querySelector(":scope > .torchrig-gpu-notice")) {
      return;
    }
    const notice = document.createElement("div");
    notice.className = "torchrig-gpu-notice";
    notice.setAttribute("role", "status");
    notice.textContent = NOTICE;
    // Over a chart it floats, so the chart's own layout (sized to its box) is left alone.
    notice.style.cssText = STYLE + (floating ? "position: absolute; top: 40px; left: 0;" : "");
    node.prepend(notice);
  }

  function markAll(app) {
    for (const area of ["left", "right", "main"]) {
      for (const widget of app.shell.widgets(area)) {
        if (widget.id === PANEL) {
          addNotice(widget.node, false);
        } else if (CHARTS.has(widget.id)) {
          addNotice((widget.content || widget).node, true);
        }
      }
    }
  }

  async function reportsNoGpu(app) {
    const url = app.serviceManager.serverSettings.baseUrl + "nvdashboard/accelerators/check";
    try {
      const reply = await window.fetch(url, { credentials: "same-origin" });
      return reply.ok && (await reply.json()).has_gpu === false;
    } catch (error) {
      return false;
    }
  }

  const plugin = {
    id: NAME + ":plugin",
    description: "Says so in the GPU dashboard when there is no GPU.",
    autoStart: true,
    // Not awaited: the layout is restored only once every plugin has activated.
    activate: (app) => {
      void app.restored.then(async () => {
        if (await reportsNoGpu(app)) {
          markAll(app);
          app.shell.layoutModified.connect(() => markAll(app));
        }
      });
    },
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = {
    init: () => {},
    get: () => Promise.resolve(() => ({ __esModule: true, default: [plugin] })),
  };
})();
